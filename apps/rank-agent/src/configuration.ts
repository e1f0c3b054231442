// @cmesh/rank-agent/config: the agent's settings (schema, loader, --help) and node mode's plan,
// for the deployment checks and documentation tests that compare them with manifests and docs.
export { AgentSettings, AgentConfig, loadConfig, agentHelp } from './config';
export { nodePlan, NodePlan, NodeAgent, NodeModeError } from './node/node-plan';
