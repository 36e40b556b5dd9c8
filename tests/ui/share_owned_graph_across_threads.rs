// cuda-sys's owned graph handle is `Send` but not `Sync`: graph objects are
// not internally synchronized, so `&OwnedGraph` may not reach two threads
// (cuda_sys::handle, the `Shared` kinds). Its borrowed form is not `Send`.
use cuda_sys::result::{graph, stream};
use cuda_sys::{BorrowedStream, OwnedGraph};

fn share(g: &OwnedGraph) {
    std::thread::scope(|scope| {
        scope.spawn(|| graph::node_count(g));
        scope.spawn(|| graph::node_count(g));
    });
}

fn main() {
    let drv = cuda_sim::install().expect("cuda-sim");
    if let Ok(g) = stream::end_capture(BorrowedStream::legacy(drv)) {
        share(&g);
        let b = g.as_borrowed();
        std::thread::spawn(move || graph::node_count(b));
    }
}
