// Renders a kustomization the way `kubectl kustomize` does for the features k8s/ uses:
// resources (files and directories), components (kind Component: their resources and patches,
// applied to what the resources made, before the kustomization's own transformers), namespace,
// JSON 6902 patches with a target, strategic merge patches that delete an object ($patch: delete), and images (applied after the patches, as kustomize does).
// Anything else in a kustomization is refused, so the rendering can't silently differ from
// kustomize's.
import { existsSync, readFileSync, statSync } from 'fs';
import { join } from 'path';
import { loadAll, load } from 'js-yaml';

export type K8sObject = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; [k: string]: unknown }; [k: string]: any };

const CLUSTER_SCOPED = new Set([
  'Namespace',
  'ClusterRole',
  'ClusterRoleBinding',
  'PersistentVolume',
  'StorageClass',
  'CustomResourceDefinition',
  'PriorityClass',
]);
const KNOWN = new Set(['apiVersion', 'kind', 'namespace', 'resources', 'components', 'patches', 'images']);

interface ImageRule {
  name: string;
  newName?: string;
  newTag?: string;
  digest?: string;
}

interface Target {
  group?: string;
  version?: string;
  kind?: string;
  name?: string;
}
type Op = { op: 'add' | 'replace' | 'remove' | 'test'; path: string; value?: unknown };

function kustomizationFile(dir: string): string {
  for (const n of ['kustomization.yaml', 'kustomization.yml', 'Kustomization']) if (existsSync(join(dir, n))) return join(dir, n);
  throw new Error(`no kustomization in ${dir}`);
}

function matches(o: K8sObject, t: Target): boolean {
  const [group, version] = o.apiVersion.includes('/') ? o.apiVersion.split('/') : ['', o.apiVersion];
  return (
    (t.kind === undefined || t.kind === o.kind) &&
    (t.name === undefined || t.name === o.metadata.name) &&
    (t.group === undefined || t.group === group) &&
    (t.version === undefined || t.version === version)
  );
}

function pointer(path: string): string[] {
  if (!path.startsWith('/')) throw new Error(`JSON pointer must start with /: ${path}`);
  return path
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/** RFC 6902 add / replace / remove / test, in place. */
export function applyJsonPatch(doc: any, ops: Op[]): void {
  for (const { op, path, value } of ops) {
    const keys = pointer(path);
    const last = keys.pop()!;
    let parent = doc;
    for (const k of keys) {
      parent = Array.isArray(parent) ? parent[Number(k)] : parent?.[k];
      if (parent === undefined || parent === null) throw new Error(`${op} ${path}: ${k} does not exist`);
    }
    const copy = structuredClone(value);
    if (op === 'test') {
      const cur = Array.isArray(parent) ? parent[Number(last)] : parent[last];
      if (JSON.stringify(cur) !== JSON.stringify(value)) throw new Error(`test ${path}: ${JSON.stringify(cur)} is not ${JSON.stringify(value)}`);
      continue;
    }
    if (Array.isArray(parent)) {
      const i = last === '-' ? parent.length : Number(last);
      if (!Number.isInteger(i) || i < 0 || i > parent.length || (op !== 'add' && i >= parent.length)) throw new Error(`${op} ${path}: index out of range`);
      if (op === 'add') parent.splice(i, 0, copy);
      else if (op === 'replace') parent[i] = copy;
      else parent.splice(i, 1);
    } else {
      if (op !== 'add' && !(last in parent)) throw new Error(`${op} ${path}: ${last} does not exist`);
      if (op === 'remove') delete parent[last];
      else parent[last] = copy;
    }
  }
}

/** name[:tag][@digest] split as kustomize does (a registry's port is part of the name). */
export function splitImage(image: string): { name: string; tag?: string; digest?: string } {
  const [rest, digest] = image.split('@');
  const slash = rest.lastIndexOf('/');
  const colon = rest.lastIndexOf(':');
  return colon > slash ? { name: rest.slice(0, colon), tag: rest.slice(colon + 1), digest } : { name: rest, digest };
}

/** kustomize's images: every container and init container whose image name a rule names. */
export function applyImages(objs: K8sObject[], rules: ImageRule[]): void {
  for (const o of objs) {
    const spec = o.spec?.template?.spec ?? (o.kind === 'Pod' ? o.spec : undefined);
    for (const c of [...(spec?.initContainers ?? []), ...(spec?.containers ?? [])]) {
      const cur = splitImage(c.image);
      const rule = rules.find((r) => r.name === cur.name);
      if (!rule) continue;
      const name = rule.newName ?? cur.name;
      if (rule.digest) c.image = `${name}@${rule.digest}`;
      else if (rule.newTag) c.image = `${name}:${rule.newTag}`;
      else c.image = `${name}${cur.tag ? `:${cur.tag}` : ''}${cur.digest ? `@${cur.digest}` : ''}`;
    }
  }
}

function loadResources(dir: string, resources: string[], out: K8sObject[]): void {
  for (const r of resources) {
    const p = join(dir, r);
    if (statSync(p).isDirectory()) out.push(...renderKustomization(p));
    else out.push(...(loadAll(readFileSync(p, 'utf8')).filter((d) => d !== null && d !== undefined) as K8sObject[]));
  }
}

/** A strategic merge patch that deletes the object it names ($patch: delete), the one kind of one this renderer knows. */
function deletePatch(dir: string, doc: Record<string, any>, out: K8sObject[]): void {
  if (doc.$patch !== 'delete' || !doc.kind || !doc.metadata?.name) throw new Error(`${dir}: a patch without a target must be $patch: delete of a named object`);
  const i = out.findIndex((o) => o.apiVersion === doc.apiVersion && o.kind === doc.kind && o.metadata.name === doc.metadata.name);
  if (i < 0) throw new Error(`${dir}: $patch: delete of ${doc.kind}/${doc.metadata.name} matches no resource`);
  out.splice(i, 1);
}

function applyPatches(dir: string, patches: { path?: string; target?: Target; patch?: string }[], out: K8sObject[]): void {
  for (const patch of patches) {
    const ops = load(patch.path ? readFileSync(join(dir, patch.path), 'utf8') : patch.patch!) as Op[];
    if (!Array.isArray(ops) && !patch.target) {
      deletePatch(dir, ops as Record<string, any>, out);
      continue;
    }
    if (!Array.isArray(ops) || !patch.target) throw new Error(`${dir}: only JSON 6902 patches with a target are supported`);
    const hit = out.filter((o) => matches(o, patch.target!));
    if (hit.length === 0) throw new Error(`${dir}: patch ${patch.path} matches no resource`);
    for (const o of hit) applyJsonPatch(o, ops);
  }
}

export function renderKustomization(dir: string): K8sObject[] {
  const k = load(readFileSync(kustomizationFile(dir), 'utf8')) as Record<string, any>;
  for (const key of Object.keys(k)) if (!KNOWN.has(key)) throw new Error(`${dir}: kustomization field ${key} is not supported by this renderer`);
  if (k.kind === 'Component') throw new Error(`${dir}: a Component renders only as part of a kustomization's components`);
  const out: K8sObject[] = [];
  loadResources(dir, k.resources ?? [], out);
  for (const c of (k.components ?? []) as string[]) {
    const cdir = join(dir, c);
    const comp = load(readFileSync(kustomizationFile(cdir), 'utf8')) as Record<string, any>;
    if (comp.kind !== 'Component') throw new Error(`${cdir}: not a kind: Component`);
    for (const key of Object.keys(comp))
      if (!['apiVersion', 'kind', 'resources', 'patches'].includes(key)) throw new Error(`${cdir}: component field ${key} is not supported by this renderer`);
    loadResources(cdir, comp.resources ?? [], out);
    applyPatches(cdir, comp.patches ?? [], out);
  }
  if (k.namespace) for (const o of out) if (!CLUSTER_SCOPED.has(o.kind)) o.metadata.namespace = k.namespace;
  applyPatches(dir, k.patches ?? [], out);
  if (k.images) applyImages(out, k.images as ImageRule[]);
  return out;
}

export const keyOf = (o: K8sObject) => `${o.kind}/${o.metadata.name}`;

export function byKey(objs: K8sObject[]): Map<string, K8sObject> {
  return new Map(objs.map((o) => [keyOf(o), o]));
}
