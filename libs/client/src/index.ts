// @cmesh/client: collectives as a service over a mesh's NATS server (docs/api.md, "Collectives as a service").
export { connectMesh, ConnectMeshOptions, JoinOptions, MeshConnection, ServiceRequestError } from './connect-mesh';
export { ServiceGroup, ServiceGroupOptions, OpOptions, OpTiming, DEFAULT_OP_TIMEOUT_MS, typedError } from './service-group';
export { ServiceTensor, dtypeOfTensor, bytesOf } from './tensor';
export { Assembly, EarlyChunks, chunkOf } from './chunks';
export { GroupChannel, GroupChannelOptions, ServiceGroupDropReason } from './group-channel';
export { Liveness, OwnConnection, SERVICE_GROUP_OUTAGE_MS, describe } from './liveness';
export { PeerGate } from './peer-gate';
export { MAX_FRAME_BYTES, readFrames, writeFrame } from './local-frames';
export { LocalLink } from './local-link';
export { CmeshError, CollectiveMismatchError, DistTimeoutError, InvalidArgumentError, PeerFailureError } from '@cmesh/collectives/errors';
