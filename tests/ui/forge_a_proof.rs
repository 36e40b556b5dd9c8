// A proof of a wait comes only from a real wait.
use gpu_sync::StreamSynced;

fn main() {
    let proof = StreamSynced { stream: 1, device: 0, ticket: u64::MAX };
    println!("{proof:?}");
}
