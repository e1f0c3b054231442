// Metric names live beside the library's exporter (the library depends on nothing of ours);
// every app takes them from here.
export { METRICS, DURATION_BUCKETS, MAX_SIZE_CLASS, sizeBucket, sizeClass, opLabel } from '@cmesh/collectives/metrics';
