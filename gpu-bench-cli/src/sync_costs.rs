//! placeholder
use crate::common::{Ctx, Failure};
use gpu_bench::Report;
/// Runs it.
pub fn run(ctx: &Ctx) -> Result<Report, Failure> {
    ctx.report("sync_costs")
}
