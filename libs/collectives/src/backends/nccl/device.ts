// Which GPU a rank uses, as torch's init_process_group(device_id=...) does: the one asked for,
// else LOCAL_RANK (one rank per GPU of the host), else 0; checked against what CUDA sees.
import { InvalidArgumentError } from '../../errors';
import { NcclUnavailableError } from './errors';

export function chooseDevice(requested: number | undefined, env: NodeJS.ProcessEnv, deviceCount: number): number {
  let device: number;
  let source: string;
  if (requested !== undefined) {
    if (!Number.isInteger(requested) || requested < 0)
      throw new InvalidArgumentError(`initProcessGroup: deviceId must be a non-negative integer, got ${String(requested)}`);
    device = requested;
    source = 'deviceId';
  } else if (env.LOCAL_RANK !== undefined && env.LOCAL_RANK !== '') {
    device = Number(env.LOCAL_RANK);
    if (!Number.isInteger(device) || device < 0)
      throw new InvalidArgumentError(`initProcessGroup: LOCAL_RANK must be a non-negative integer to pick the GPU, got ${JSON.stringify(env.LOCAL_RANK)}`);
    source = `LOCAL_RANK=${env.LOCAL_RANK}`;
  } else {
    device = 0;
    source = 'the default, LOCAL_RANK unset';
  }
  if (device >= deviceCount) {
    throw new NcclUnavailableError(
      `CUDA device ${device} (${source}) does not exist: CUDA sees ${deviceCount} device${deviceCount === 1 ? '' : 's'}`,
      'initProcessGroup',
      ['device'],
    );
  }
  return device;
}
