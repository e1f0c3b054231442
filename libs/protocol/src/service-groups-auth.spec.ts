import {
  SERVICE_GROUP_MAC_HEADER,
  openServiceGroupSecret,
  sealServiceGroupSecret,
  serviceGroupKeys,
  serviceGroupKeyFrom,
  serviceGroupLocalProof,
  serviceGroupMac,
  serviceGroupMacValid,
  serviceGroupProofValid,
} from './service-groups-auth';

const G = Buffer.alloc(32, 9);
const headers = (h: Record<string, string>) => ({ get: (k: string) => h[k] ?? '' });

describe('service group integrity', () => {
  const { mac, local, dataPlane } = serviceGroupKeys(G);

  it('derives distinct keys from the group secret, and a data-plane secret long enough for the library', () => {
    expect(mac.equals(local)).toBe(false);
    expect(dataPlane.length).toBeGreaterThanOrEqual(32);
    expect(serviceGroupKeys(Buffer.alloc(32, 8)).mac.equals(mac)).toBe(false);
  });

  it('a MAC holds for its subject, chunk headers and payload only', () => {
    const payload = Buffer.from('{"seq":1}');
    const m = serviceGroupMac(mac, 'cmesh.svc.g.a_1.op.0', '1', '0', payload);
    const ok = headers({ 'Cmesh-Seq': '1', 'Cmesh-Offset': '0', [SERVICE_GROUP_MAC_HEADER]: m });
    expect(serviceGroupMacValid(mac, 'cmesh.svc.g.a_1.op.0', ok, payload)).toBe(true);
    expect(serviceGroupMacValid(mac, 'cmesh.svc.g.a_1.op.1', ok, payload)).toBe(false);
    expect(serviceGroupMacValid(mac, 'cmesh.svc.g.a_1.op.0', headers({ 'Cmesh-Seq': '2', 'Cmesh-Offset': '0', [SERVICE_GROUP_MAC_HEADER]: m }), payload)).toBe(
      false,
    );
    expect(serviceGroupMacValid(mac, 'cmesh.svc.g.a_1.op.0', ok, Buffer.from('{"seq":2}'))).toBe(false);
    expect(serviceGroupMacValid(serviceGroupKeys(Buffer.alloc(32, 1)).mac, 'cmesh.svc.g.a_1.op.0', ok, payload)).toBe(false);
    expect(serviceGroupMacValid(mac, 'cmesh.svc.g.a_1.op.0', headers({}), payload)).toBe(false);
    expect(serviceGroupMacValid(mac, 'cmesh.svc.g.a_1.op.0', headers({ [SERVICE_GROUP_MAC_HEADER]: 'zz'.repeat(32) }), payload)).toBe(false);
    expect(serviceGroupMacValid(mac, 'cmesh.svc.g.a_1.op.0', undefined, payload)).toBe(false);
  });

  it('a sealed secret opens with its member key, group and rank only', () => {
    const key = Buffer.alloc(32, 3);
    const sealed = sealServiceGroupSecret(key, G, 'a_1', 1);
    expect(openServiceGroupSecret(key, sealed, 'a_1', 1)?.equals(G)).toBe(true);
    expect(openServiceGroupSecret(key, sealed, 'a_1', 0)).toBeNull();
    expect(openServiceGroupSecret(key, sealed, 'a_2', 1)).toBeNull();
    expect(openServiceGroupSecret(Buffer.alloc(32, 4), sealed, 'a_1', 1)).toBeNull();
    expect(openServiceGroupSecret(key, 'AAAA', 'a_1', 1)).toBeNull();
  });

  it('keys are 32 bytes in base64; the local proofs are bound to the role', () => {
    expect(serviceGroupKeyFrom(G.toString('base64'))?.equals(G)).toBe(true);
    expect(serviceGroupKeyFrom('abc')).toBeNull();
    expect(serviceGroupKeyFrom(undefined)).toBeNull();
    const agent = serviceGroupLocalProof(local, 'agent', 'm', 'a');
    expect(serviceGroupProofValid(local, 'agent', 'm', 'a', agent)).toBe(true);
    expect(serviceGroupProofValid(local, 'member', 'm', 'a', agent)).toBe(false);
    expect(serviceGroupProofValid(local, 'agent', 'm', 'b', agent)).toBe(false);
    expect(serviceGroupProofValid(local, 'agent', 'm', 'a', 'nope')).toBe(false);
  });
});
