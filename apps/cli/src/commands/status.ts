// `cmesh status`: the mesh as the coordinator sees it: agents (state, backends, last
// heartbeat, job), process groups and recent jobs.
import { Command } from 'commander';
import { DEFAULT_COORDINATOR, MeshClient } from '../mesh/client';
import { listAgents } from '../mesh/launch';
import { agentsTable, groupsTable, jobsTable, normaliseGroups } from '../mesh/status-view';

export async function renderStatus(client: MeshClient, jobsLimit = 10): Promise<string> {
  const [agents, groups, jobs] = await Promise.all([
    listAgents(client),
    client.get<unknown>('/groups').then(normaliseGroups),
    client.jobs(jobsLimit),
  ]);
  const busy: Record<string, string> = {};
  for (const j of jobs) if (j.state === 'running') for (const m of j.members) busy[m.agentId] = j.id;
  return [`Coordinator ${client.base}`, agentsTable(agents, busy), groupsTable(groups), jobsTable(jobs)].join('\n\n') + '\n';
}

export function register(program: Command): void {
  program
    .command('status')
    .description('agents, groups and recent jobs of a running mesh')
    .option('--coordinator <url>', 'coordinator REST address (or CMESH_COORDINATOR)', DEFAULT_COORDINATOR)
    .option('--jobs <n>', 'recent jobs to show', '10')
    .option('--json', 'print JSON instead of tables')
    .action(async (o: { coordinator: string; jobs: string; json?: boolean }) => {
      const client = new MeshClient(o.coordinator);
      if (o.json) {
        const [agents, groups, jobs] = await Promise.all([listAgents(client), client.get('/groups'), client.jobs(Number(o.jobs))]);
        process.stdout.write(JSON.stringify({ agents, groups, jobs }, null, 2) + '\n');
      } else process.stdout.write(await renderStatus(client, Number(o.jobs)));
    });
}
