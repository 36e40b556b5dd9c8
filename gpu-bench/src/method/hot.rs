//! Hot: event pairs around each run after warmup, the steady state; samples
//! in gated rounds ([`crate::clock::events`]).

use super::Method;
use crate::bench::{Bench, FirstCall};
use crate::clock::events::{Pipeline, Work};
use crate::error::Result;
use crate::record::{Mode, ModeResult, Record};
use crate::timer::Timer;
use gpu_sync::Stream;

/// See the module docs.
pub(crate) struct HotMethod;

impl Method for HotMethod {
    fn mode(&self) -> Mode {
        Mode::Hot
    }

    fn measure(
        &self,
        bench: &Bench,
        timer: &mut Timer,
        _rec: &mut Record,
        _first: Option<&mut FirstCall<'_>>,
        f: &mut dyn FnMut(&Stream) -> gpu_sync::Result<()>,
    ) -> Result<Option<ModeResult>> {
        Ok(Some(bench.sample(timer, Mode::Hot, 1, &mut Pipeline::new(Work::Run(f)))?))
    }
}
