// Port of src/ch2/multi_process_3.py (large-scale-lm-tutorials, both versions).
// Run: cmesh run --nproc-per-node 4 examples/multi_process_3.ts
// The whole script is the subprocess; the launcher sets RANK, LOCAL_RANK, WORLD_SIZE, ...
console.log(`hello world, ${process.env.RANK}`);
