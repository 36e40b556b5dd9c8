//! Measurement you can trust, for CUDA work driven through gpu-sync.
//!
//! - [`timer`]: device-event timing with warmup and nvbench-style adaptive
//!   stopping (min samples, min time, max relative noise, timeout);
//! - [`stats`]: median, quartiles, IQR, mean, stdev, relative noise;
//! - [`roofline`]: HBM bandwidth ceilings (read, copy, triad) with every
//!   result checked against the CPU reference;
//! - [`overhead`]: host cost of a tracked launch against a raw driver launch;
//! - [`info`]: the device facts every report carries;
//! - [`report`]: narrow markdown tables and versioned JSON.
//!
//! The `gpu-bench` binary drives them; `cargo xtask roofline` runs the main
//! job.
#![deny(unsafe_code)]

pub mod info;
pub mod overhead;
pub mod report;
pub mod roofline;
pub mod stats;
pub mod timer;
