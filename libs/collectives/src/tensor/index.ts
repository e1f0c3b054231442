export * from './dtype';
export {
  Float16Array,
  BFloat16Array,
  f32ToF16Bits,
  f32ToBf16Bits,
  f16BitsToF32,
  bf16BitsToF32,
  f32BitsToF16Bits,
  f32BitsToBf16Bits,
} from './half';
