// The flight recorder: a ring of each rank's recent ops (recorder), torch-shaped dumps (dump), the
// one analysis of "which rank is stuck, and where" (analysis), the exchange at a timeout
// (exchange) and the live answer to the coordinator (responder), signed (answer-mac).
export {
  FlightRecorder,
  GroupTrace,
  TraceRecord,
  TraceState,
  DEFAULT_TRACE_BUFFER_SIZE,
  TRACE_BUFFER_ENV,
  flightRecorder,
  resetFlightRecorder,
  traceBufferSize,
  toEpochNs,
} from './recorder';
export {
  TraceDump,
  TraceEntry,
  PgConfig,
  PgStatus,
  TRACE_DUMP_DIR_ENV,
  TRACE_DUMP_VERSION,
  buildDump,
  buildSummary,
  dumpFileName,
  readDumps,
  writeDump,
} from './dump';
export { GroupReport, RankView, OpView, AnalyzeOptions, analyzeTraces, formatReports, describeLagging, clockTime } from './analysis';
export { TRACE_EXCHANGE_ENV, DEFAULT_TRACE_EXCHANGE_MS, traceExchangeMs } from './exchange';
export { TRACE_NATS_URL_ENV, TRACE_SUBJECT_ENV, TraceRequest } from './responder';
export { TRACE_MAC_HEADER, TRACE_NONCE_MAX, traceAnswerKey, traceAnswerMac, checkTraceAnswerMac } from './answer-mac';
