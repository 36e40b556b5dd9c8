// A captured graph may not be used from two threads at once (the driver does
// not synchronize graph objects, not even `cuGraphInstantiate`): `&Graph`
// cannot cross threads. Moving the graph, or sharing a `GraphExec`, can.
use gpu_sync::{Device, Stream};

fn main() -> gpu_sync::Result<()> {
    let dev = Device::get(0)?;
    let s = Stream::new(&dev)?;
    let graph = s.capture(|_| Ok(()))?;
    std::thread::scope(|scope| {
        scope.spawn(|| graph.instantiate());
        scope.spawn(|| graph.node_count());
    });
    Ok(())
}
