//! Replays the fuzz target `ros2`'s seed corpus and any saved crash
//! (`fuzz/corpus/ros2`, `fuzz/artifacts/ros2`) through the same check.

use std::path::Path;

#[test]
fn the_ros2_corpus_and_saved_crashes_pass_the_check() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut n = 0;
    for dir in ["corpus/ros2", "artifacts/ros2"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        for e in entries.flatten() {
            let bytes = std::fs::read(e.path()).expect("read a corpus file");
            rosgate_ros2::fuzzing::check(&bytes);
            n += 1;
        }
    }
    assert!(n >= 10, "the seed corpus is missing ({n} files)");
}
