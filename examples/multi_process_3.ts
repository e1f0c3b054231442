// Port of src/ch2/multi_process_3.py (seed 000 and seed 001, large-scale-lm-tutorials).
// Run: cmesh run --nproc-per-node 4 examples/multi_process_3.ts
// The whole script is the subprocess; the launcher sets RANK, LOCAL_RANK, WORLD_SIZE, ...
console.log(`hello world, ${process.env.RANK}`);
