//! cugrade's integration tests: one crate (one link, one binary `target/debug/deps/it-*`),
//! one module per area, sharing `support` (the binary, the repository root, the NVRTC gate,
//! snapshots, scratch courses).
//!
//! Run one area with a filter, `cargo test --test it cohort::`, or one test with `cargo test
//! --test it -- --exact cohort::merge_refuses_conflicting_shards_and_bad_usage`. Snapshots
//! are rewritten with `UPDATE_SNAPSHOTS=1`. Tests share this process and run on threads: see
//! `support` for what a test may not change.

mod adversarial;
mod architecture;
mod cheats;
mod cli;
mod cohort;
mod cohort_fixture;
mod cohort_hostile;
mod course_pmpp;
mod cpu_python;
mod cuda_headers;
mod cupy_submissions;
mod docs_rubrics;
mod emu_corpus;
mod estimate;
mod first_contact;
mod first_contact_review;
mod function_lab;
mod gpu;
mod gpus;
mod hostile;
mod labs_common;
mod labs_compile;
mod labs_examples;
mod labs_rubrics;
mod machine_outputs;
mod measure;
mod memory_bounds;
mod numba_submissions;
mod one_student;
mod precision_model;
mod ranks;
mod readme_path;
mod report_caps;
mod report_once;
mod report_outputs;
mod resource_facts;
mod rubric_errors;
mod sandbox_attacks;
mod sandbox_fixtures;
mod sandbox_memory;
mod sanitizer;
mod scratch_buffers;
mod shared_reference;
mod student;
mod support;
mod toolchain_access;
mod watch;
mod worker_cgroup;
