//! Launching device code: kernels, their launch configuration and typed
//! signatures ([`kernel`]), modules ([`module`]) and the validation of the
//! images they load ([`image`]), run-time compilation ([`nvrtc`]), and the
//! door for foreign GPU code on a gpu-sync stream ([`foreign`]).
//!
//! This layer sits on memory (kernel arguments are buffer views) and the
//! tracker (each launch is one tracked submission).
//!
//! Unsafe code, for this folder: kernel parameters and module images are
//! handed to the driver by raw pointer, typed kernels are declared by an
//! `unsafe fn` whose contract makes launching them safe, and NVRTC is called
//! through its function table. Each `unsafe` block argues its call.
#![allow(unsafe_code)]

pub(crate) mod config;
pub(crate) mod foreign;
pub(crate) mod image;
pub(crate) mod kernel;
pub(crate) mod module;
pub mod nvrtc;
pub(crate) mod signature;
