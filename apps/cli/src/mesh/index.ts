// @cmesh/cli/mesh: `cmesh up` as a library (start a coordinator, agents and nats-server as
// supervised child processes) and the coordinator's REST client. Tests, benchmarks and scripts
// start meshes through this entry (libs/testing re-exports it as the mesh fixture).
export { startMesh, listAgents, normaliseAgent, Mesh, MeshOptions, AgentRow } from './launch';
export { Supervisor, ChildSpec, Supervised, RestartPolicy, DEFAULT_RESTART_POLICY } from './supervisor';
export { MeshClient, MeshApiError, answerMayBeLost, DEFAULT_COORDINATOR } from './client';
export { CLIENT_USER, COORDINATOR_USER, MeshAuth, prepareMeshAuth } from './mesh-auth';
export { nodeArgs, programEnv, programOf } from '../programs';
