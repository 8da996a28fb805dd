//! The pmpp course tree (tests/courses/pmpp): labs an instructor writes with the rubric language
//! alone (issue 33): a scan whose tolerance reads the element's index, with a single-pass
//! milestone on scratch workspace and a three-kernel milestone (`then`); a 256-bin histogram of
//! `u8` data with a contended case drawn by the case's own generator; an RGB8 image to gray.
//! Every example is graded by `cugrade test`, as the course's own CI would, and gets the
//! verdicts its expected.yaml promises.

use crate::support::{cugrade, nvrtc, output_text, root};

#[test]
fn the_pmpp_course_grades_every_example_as_promised() {
    if !(nvrtc() && cugrade::compile::arrays::numpy().is_ok()) {
        return;
    }
    let course = root().join("tests/courses/pmpp");
    for rubric in ["scan", "histogram", "rgb"] {
        let o = cugrade()
            .arg("validate")
            .arg(course.join(format!("rubrics/{rubric}.yaml")))
            .args(["--backend", "emu"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{rubric}: {}", output_text(&o));
    }
    let o = cugrade()
        .args(["test", "--backend", "emu"])
        .arg(&course)
        .output()
        .unwrap();
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    let examples = std::fs::read_dir(course.join("submissions-example"))
        .unwrap()
        .flat_map(|lab| std::fs::read_dir(lab.unwrap().path()).unwrap())
        .count();
    assert!(examples >= 16, "{examples}");
    assert!(
        text.contains(&format!(
            "{examples} of {examples} examples got the verdicts"
        )),
        "{text}"
    );
    // The kinds of wrong the labs are written to catch, each named as such.
    for ok in [
        "ok    submissions-example/scan/exclusive",
        "ok    submissions-example/scan/late_join",
        "ok    submissions-example/scan/three_pass_bugs",
        "ok    submissions-example/histogram/racy",
        "ok    submissions-example/rgb/bgr",
    ] {
        assert!(text.contains(ok), "{ok}: {text}");
    }
}
