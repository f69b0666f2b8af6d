//! Node control: how admitted jobs reach machines. Today the executors (simulated nodes and
//! local processes); the GPU node agent (NVML inventory, MIG, telemetry) goes here next.

pub mod executor;
