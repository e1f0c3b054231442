// Entry point of one rank process: runs the named scenario and prints its result as JSON.
import * as path from 'path';

(async () => {
  const [name, rawArgs] = process.argv.slice(2);
  const mod = await import(path.join(__dirname, 'scenarios', `${name}.ts`));
  const result = await mod.run(JSON.parse(rawArgs));
  process.stdout.write(`\n${JSON.stringify(result ?? null)}\n`);
  process.exit(0);
})().catch((err) => {
  process.stdout.write(`\n${JSON.stringify({ uncaught: { name: err?.name, message: err?.message } })}\n`);
  process.exit(1);
});
