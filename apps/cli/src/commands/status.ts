// `cmesh status`: the mesh as the coordinator sees it: agents (state, backends, last
// heartbeat, job), process groups, service groups and recent jobs.
import { Command } from 'commander';
import { printableJson, printableLines, type ServiceGroupSummary, type TraceReport } from '@cmesh/protocol';
import { DEFAULT_COORDINATOR, MeshApiError, MeshClient, clientToken } from '../mesh/client';
import { listAgents } from '../mesh/launch';
import { agentsTable, groupsTable, jobsTable, normaliseGroups, serviceGroupsTable } from '../mesh/status-view';

/** The service groups (GET /service-groups); null from a coordinator older than the route (404). */
async function serviceGroups(client: MeshClient): Promise<ServiceGroupSummary[] | null> {
  try {
    return (await client.get<{ groups: ServiceGroupSummary[] }>('/service-groups')).groups;
  } catch (e) {
    if (e instanceof MeshApiError && e.status === 404) return null;
    throw e;
  }
}

export async function renderStatus(client: MeshClient, jobsLimit = 10): Promise<string> {
  const [agents, groups, serviceGroupList, jobs] = await Promise.all([
    listAgents(client),
    client.get<unknown>('/groups').then(normaliseGroups),
    serviceGroups(client),
    client.jobs(jobsLimit),
  ]);
  const busy: Record<string, string> = {};
  for (const j of jobs) if (j.state === 'running') for (const m of j.members) busy[m.agentId] = j.id;
  return (
    [
      `Coordinator ${client.base}`,
      agentsTable(agents, busy),
      groupsTable(groups),
      ...(serviceGroupList ? [serviceGroupsTable(serviceGroupList)] : []),
      jobsTable(jobs),
    ].join('\n\n') + '\n'
  );
}

/** A group is shown by --stuck when a rank is not with the others, or its collective is this old. */
export const STUCK_AFTER_S = 1;

/**
 * `cmesh status --stuck`: the coordinator asks every rank that answers trace requests what it is
 * doing (GET /traces) and prints the groups where a rank waits on another, one line each; a
 * group whose answers the coordinator could not authenticate says "(unverified)".
 */
export async function renderStuck(client: MeshClient, waitMs?: number): Promise<{ text: string; stuck: number }> {
  const r = await client.get<TraceReport>(`/traces${waitMs ? `?waitMs=${waitMs}` : ''}`);
  const stuck = r.reports.filter((g) => g.stuck || (g.waiting.length > 0 && g.age_s >= STUCK_AFTER_S));
  // unverified groups: answers nobody could check (see "A collective is stuck" in the operations guide)
  const head = `${r.answered} ranks answered in ${r.waitedMs} ms${r.rejected ? `; ${r.rejected} answers without a valid signature dropped` : ''}`;
  return {
    stuck: stuck.length,
    text: `${head}
${stuck.length ? stuck.map((g) => printableLines(g.text)).join('\n') : 'no stuck group'}\n`,
  };
}

export function register(program: Command): void {
  program
    .command('status')
    .description('agents, groups, service groups and recent jobs of a running mesh')
    .option('--coordinator <url>', 'coordinator REST address (or CMESH_COORDINATOR)', DEFAULT_COORDINATOR)
    .option(
      '--token-file <path>',
      "file holding the coordinator's bearer token (or CMESH_API_TOKEN / CMESH_API_TOKEN_FILE; default for a local coordinator: cmesh up's)",
    )
    .option('--jobs <n>', 'recent jobs to show', '10')
    .option('--json', 'print JSON instead of tables')
    .option('--stuck', "ask every rank's flight recorder (GET /traces) and print the process groups where a rank is stuck")
    .action(async (o: { coordinator: string; tokenFile?: string; jobs: string; json?: boolean; stuck?: boolean }) => {
      const client = new MeshClient(o.coordinator, undefined, clientToken(o.coordinator, o.tokenFile));
      if (o.stuck) {
        if (o.json) process.stdout.write(printableJson(await client.get('/traces'), 2) + '\n');
        else process.stdout.write((await renderStuck(client)).text);
        return;
      }
      if (o.json) {
        const [agents, groups, serviceGroupList, jobs] = await Promise.all([
          listAgents(client),
          client.get('/groups'),
          serviceGroups(client),
          client.jobs(Number(o.jobs)),
        ]);
        process.stdout.write(printableJson({ agents, groups, serviceGroups: serviceGroupList ?? [], jobs }, 2) + '\n');
      } else process.stdout.write(await renderStatus(client, Number(o.jobs)));
    });
}
