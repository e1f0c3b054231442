export * from './dtype';
export { Float16BitsArray, BFloat16BitsArray, f32ToF16Bits, f32ToBf16Bits, f16BitsToF32, bf16BitsToF32, f32BitsToF16Bits, f32BitsToBf16Bits } from './half';
