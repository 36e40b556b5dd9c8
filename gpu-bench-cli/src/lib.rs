//! The `gpu-bench` command's definition, shared by the binary and its
//! tests: the flags ([`cli`]) and their ranges ([`bounds`]).

pub mod bounds;
pub mod cli;
