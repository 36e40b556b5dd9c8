//! `GPU_SYNC_DRIVER` chooses the driver at the first device use even when
//! the program never calls `select_driver()`: run in a process of its own
//! (the driver is chosen once per process), as a program would be.

use gpu_sync::{Backend, Device};
use std::process::Command;

#[test]
fn the_variable_is_honoured_without_select_driver() {
    let exe = std::env::current_exe().expect("this test binary");
    for (value, ok) in [("sim", true), ("bogus", false)] {
        let out = Command::new(&exe)
            .args(["--exact", "child_uses_the_variable", "--include-ignored", "--test-threads=1"])
            .env("GPU_SYNC_DRIVER", value)
            .env("CHILD_EXPECTS", if ok { "sim" } else { "error" })
            .output()
            .expect("the child runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "GPU_SYNC_DRIVER={value}: {text}");
        assert!(text.contains("1 passed"), "GPU_SYNC_DRIVER={value}: the child did not run: {text}");
    }
}

#[test]
#[ignore = "run by the_variable_is_honoured_without_select_driver, in a process of its own"]
fn child_uses_the_variable() {
    match std::env::var("CHILD_EXPECTS").as_deref() {
        Ok("sim") => {
            // No select_driver(): the first device use picks the simulator.
            let d = Device::get(0).expect("device 0 on the simulator");
            assert_eq!(Backend::current(), Some(Backend::Sim));
            assert!(d.name().unwrap().contains("cuda-sim"));
        }
        Ok("error") => {
            let e = Device::get(0).unwrap_err();
            assert!(format!("{e:?}").contains("GPU_SYNC_DRIVER=\"bogus\""), "{e:?}");
        }
        _ => {} // run directly (the GPU bundle): nothing to check here
    }
}
