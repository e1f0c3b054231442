import { parseNcclLog, transportsByKind } from './nccl-log';

describe("NCCL's INFO log", () => {
  it("reads the device and each channel's transport, as NCCL 2.2x and the simulation print them", () => {
    const s = parseNcclLog([
      'gpu-0:4242:4250 [0] NCCL INFO comm 0x55d0c8a0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0x9f1e6c - Init COMPLETE',
      'gpu-0:4243:4251 [1] NCCL INFO comm 0x55d0c8b0 rank 1 nranks 2 cudaDev 1 busId 2a000 - Init COMPLETE',
      'vm:77:78 [3] NCCL INFO comm 0a1b rank 3 nRanks 4 cudaDev 3 - Init COMPLETE (simulated)',
      'gpu-0:4242:4262 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC',
      'gpu-0:4242:4262 [0] NCCL INFO Channel 01/0 : 0[18000] -> 1[2a000] via P2P/CUMEM/read',
      'gpu-0:4242:4262 [0] NCCL INFO Channel 02 : 1[1] -> 0[0] via SHM/direct/direct',
      'gpu-1:5000:5010 [0] NCCL INFO Channel 00/0 : 3[0] -> 0[0] [send] via NET/IB/0',
      'gpu-1:5000:5010 [0] NCCL INFO Channel 00/0 : 0[0] -> 3[0] [receive] via NET/Socket/1',
      'gpu-2:13012:13026 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/direct pointer/read',
      'gpu-3:34088:34142 [0] NCCL INFO Channel 02/0 : 7[1] -> 0[0] [receive] via NET/IBext_v8/1/GDRDMA',
      'pod-a:12090:12099 [0] NCCL INFO ncclCommInitRank comm 0x5e303a52bd70 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 57000 commId 0xadcb40d61cc1bc4b - Init COMPLETE',
      'pod-a:12090:12099 [0] NCCL INFO ncclCommInitRank comm 0x5e303a52bd70 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 57000 commId 0xadcb40d61cc1bc4b - Init START',
      'gpu-0:4242:4242 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0',
      'not a NCCL line: rank 0 nranks 2 cudaDev 0 - Init COMPLETE',
    ]);
    expect(s.inits).toEqual([
      { rank: 0, nranks: 2, cudaDev: 0, busId: '18000' },
      { rank: 1, nranks: 2, cudaDev: 1, busId: '2a000' },
      { rank: 3, nranks: 4, cudaDev: 3, busId: null },
      { rank: 0, nranks: 2, cudaDev: 0, busId: '57000' },
    ]);
    expect(s.channels.map((c) => `${c.from}->${c.to} ${c.via}`)).toEqual([
      '0->1 P2P/IPC',
      '0->1 P2P/CUMEM/read',
      '1->0 SHM/direct/direct',
      '3->0 NET/IB/0',
      '0->3 NET/Socket/1',
      '0->1 P2P/direct pointer/read',
      '7->0 NET/IBext_v8/1/GDRDMA',
    ]);
    expect(transportsByKind(s.channels)).toEqual({
      P2P: ['P2P/IPC', 'P2P/CUMEM/read', 'P2P/direct pointer/read'],
      SHM: ['SHM/direct/direct'],
      NET: ['NET/IB/0', 'NET/Socket/1', 'NET/IBext_v8/1/GDRDMA'],
    });
  });
});
