// @cmesh/client: collectives as a service over a mesh's NATS server (docs/api.md, "Collectives as a service").
export { connectMesh, ConnectMeshOptions, JoinOptions, MeshConnection, ServiceRequestError } from './connect-mesh';
export { ServiceGroup, OpOptions, OpTiming, DEFAULT_OP_TIMEOUT_MS, typedError } from './service-group';
export { ServiceTensor, dtypeOfTensor, bytesOf } from './tensor';
export { Assembly, chunkBytes, chunkOf, publishChunks } from './chunks';
export { Liveness, describe } from './liveness';
export { readFrames, writeFrame } from './local-frames';
export { LocalLink } from './local-link';
export { CmeshError, CollectiveMismatchError, DistTimeoutError, InvalidArgumentError, PeerFailureError } from '@cmesh/collectives/errors';
