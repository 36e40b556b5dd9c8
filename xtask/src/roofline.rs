//! (being written)
use anyhow::Result;
#[allow(dead_code)]
pub fn run(_a: &[String]) -> Result<()> { anyhow::bail!("unfinished") }
#[allow(dead_code)]
pub fn check() -> Result<()> { anyhow::bail!("unfinished") }
#[allow(dead_code)]
pub fn build() -> Result<()> { anyhow::bail!("unfinished") }
