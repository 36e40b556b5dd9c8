//! Graph: one run captured into a CUDA graph once and replayed, event
//! pairs around each replay ([`crate::clock::events`]).

use super::Method;
use crate::bench::{Bench, FirstCall};
use crate::clock::events::{Pipeline, Work};
use crate::error::Result;
use crate::record::{Mode, ModeResult, Record};
use crate::timer::Timer;
use gpu_sync::Stream;

/// See the module docs.
pub(crate) struct GraphMethod;

impl Method for GraphMethod {
    fn mode(&self) -> Mode {
        Mode::Graph
    }

    fn measure(
        &self,
        bench: &Bench,
        timer: &mut Timer,
        rec: &mut Record,
        _first: Option<&mut FirstCall<'_>>,
        f: &mut dyn FnMut(&Stream) -> gpu_sync::Result<()>,
    ) -> Result<Option<ModeResult>> {
        match timer.stream.capture(|c| f(c.stream())).and_then(|g| g.instantiate()) {
            Ok(exec) => {
                let mut replay = |s: &Stream| exec.launch(s);
                Ok(Some(bench.sample(timer, Mode::Graph, 1, &mut Pipeline::new(Work::Run(&mut replay)))?))
            }
            Err(e) => {
                bench.unavailable(
                    rec,
                    Mode::Graph,
                    format!("the work could not be captured into a graph: {e}"),
                )?;
                Ok(None)
            }
        }
    }
}
