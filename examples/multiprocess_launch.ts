// Port of multiprocess_launch.py, first version ("Parameter Server and All-Reduce").
// Run: cmesh run --nproc-per-node 4 examples/multiprocess_launch.ts
console.log(` Worldsize : ${process.env.WORLD_SIZE} rank: ${process.env.RANK}`);
