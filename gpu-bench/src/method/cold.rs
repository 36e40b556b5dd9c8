//! Cold: before each sample a memset over a scratch buffer of twice the L2
//! size, outside the events; each run isolated from the previous one by
//! that flush ([`crate::clock::events`]).

use super::Method;
use crate::bench::{Bench, FirstCall};
use crate::clock::events::{Pipeline, Work};
use crate::error::Result;
use crate::record::{Mode, ModeResult, Record};
use crate::timer::Timer;
use gpu_sync::Stream;

/// See the module docs.
pub(crate) struct ColdMethod;

impl Method for ColdMethod {
    fn mode(&self) -> Mode {
        Mode::Cold
    }

    fn measure(
        &self,
        bench: &Bench,
        timer: &mut Timer,
        _rec: &mut Record,
        _first: Option<&mut FirstCall<'_>>,
        f: &mut dyn FnMut(&Stream) -> gpu_sync::Result<()>,
    ) -> Result<Option<ModeResult>> {
        Ok(Some(bench.sample(timer, Mode::Cold, 1, &mut Pipeline::new(Work::Cold(f, 0)))?))
    }
}
