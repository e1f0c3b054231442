// What parameter-server.ts and allreduce-training.ts share: one configuration (same data,
// model, batches and learning rate, so both must reach the same loss) and the report lines.
import { parseArgs } from 'util';
import { Dataset, makeBlobs } from './synthetic-data';
import { MlpShape } from './mlp';
import { pyFloat } from './py-number';

export interface TrainingConfig {
  shape: MlpShape;
  samples: number;
  batchSize: number;
  steps: number;
  lr: number;
  dataSeed: number;
  initSeed: number;
  logEvery: number;
}

/** Defaults, overridable from the command line (--steps 300 --hidden 256 ...). */
export function trainingConfig(argv: string[] = process.argv.slice(2)): TrainingConfig & { rest: Record<string, string | undefined> } {
  const { values } = parseArgs({
    args: argv,
    options: {
      steps: { type: 'string', default: '200' },
      hidden: { type: 'string', default: '64' },
      features: { type: 'string', default: '16' },
      classes: { type: 'string', default: '4' },
      samples: { type: 'string', default: '2048' },
      'batch-size': { type: 'string', default: '96' },
      lr: { type: 'string', default: '0.2' },
      'log-every': { type: 'string', default: '50' },
      algorithm: { type: 'string' },
    },
    strict: true,
  });
  return {
    shape: { features: Number(values.features), hidden: Number(values.hidden), classes: Number(values.classes) },
    samples: Number(values.samples),
    batchSize: Number(values['batch-size']),
    steps: Number(values.steps),
    lr: Number(values.lr),
    dataSeed: 1234,
    initSeed: 42,
    logEvery: Number(values['log-every']),
    rest: { algorithm: values.algorithm },
  };
}

export function dataset(cfg: TrainingConfig): Dataset {
  return makeBlobs({ samples: cfg.samples, features: cfg.shape.features, classes: cfg.shape.classes, seed: cfg.dataSeed });
}

/** Loss as the test parses it: Python float repr, full precision. */
export function lossStr(x: number): string {
  return pyFloat(x);
}

export function bytesLine(rank: number, sent: number, received: number, steps: number): string {
  return `rank ${rank} bytes sent: ${sent} received: ${received} per step sent: ${Math.round(sent / steps)} received: ${Math.round(received / steps)}`;
}
