import { BFloat16BitsArray, Float16BitsArray, InvalidArgumentError } from '@cmesh/collectives';
import { bytesOf, dtypeOfTensor } from './tensor';

describe('dtypeOfTensor', () => {
  it('names the library dtype of each typed array class', () => {
    expect(dtypeOfTensor(new Float32Array(1))).toBe('float32');
    expect(dtypeOfTensor(new Float64Array(1))).toBe('float64');
    expect(dtypeOfTensor(new Int8Array(1))).toBe('int8');
    expect(dtypeOfTensor(new Uint8Array(1))).toBe('uint8');
    expect(dtypeOfTensor(new Int32Array(1))).toBe('int32');
    expect(dtypeOfTensor(new BigInt64Array(1))).toBe('int64');
    expect(dtypeOfTensor(new Float16BitsArray(1))).toBe('float16');
    expect(dtypeOfTensor(new BFloat16BitsArray(1))).toBe('bfloat16');
    expect(dtypeOfTensor(new Uint16Array(1), 'bfloat16')).toBe('bfloat16');
  });

  it('refuses a Uint16Array without its dtype, a dtype that does not match, and other classes', () => {
    expect(() => dtypeOfTensor(new Uint16Array(1))).toThrow(InvalidArgumentError);
    expect(() => dtypeOfTensor(new Float32Array(1), 'int32')).toThrow(/dtype int32 does not match a Float32Array/);
    expect(() => dtypeOfTensor(new Uint32Array(1) as unknown as Uint8Array)).toThrow(/unsupported tensor class Uint32Array/);
  });

  it('bytesOf views the tensor without copying', () => {
    const t = new Int32Array(4).subarray(1, 3);
    const b = bytesOf(t);
    b[0] = 1;
    expect(t[0]).toBe(1);
    expect(b.byteLength).toBe(8);
  });
});
