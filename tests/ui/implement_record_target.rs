// Events record only on streams gpu-sync knows.
use gpu_sync::RecordTarget;

struct MyStream;

impl RecordTarget for MyStream {}

fn main() {}
