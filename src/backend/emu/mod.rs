//! The PTX emulator backend (`--backend emu`): grades correctness on machines without a GPU.

use super::{Backend, BackendError, BackendKind, KernelInfo, LaunchDims, LaunchReport, ParamValue};
use std::time::Instant;

/// Placeholder until the emulator lands: every operation says the emulator is missing.
#[derive(Default)]
pub struct EmuBackend;

impl EmuBackend {
    pub fn new() -> Self {
        EmuBackend
    }
}

fn missing() -> BackendError {
    BackendError::Other("the PTX emulator is not built yet: grading without a GPU needs it".into())
}

impl Backend for EmuBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Emu
    }
    fn device_name(&self) -> String {
        "PTX emulator".into()
    }
    fn load_module(&mut self, _ptx: &str) -> Result<(), BackendError> {
        Err(missing())
    }
    fn kernel_info(&mut self, _name: &str) -> Result<KernelInfo, BackendError> {
        Err(missing())
    }
    fn alloc(&mut self, _bytes: usize) -> Result<u64, BackendError> {
        Err(missing())
    }
    fn free_all(&mut self) -> Result<(), BackendError> {
        Ok(())
    }
    fn write(&mut self, _addr: u64, _data: &[u8]) -> Result<(), BackendError> {
        Err(missing())
    }
    fn read(&mut self, _addr: u64, _len: usize) -> Result<Vec<u8>, BackendError> {
        Err(missing())
    }
    fn set_global(&mut self, _name: &str, _data: &[u8]) -> Result<(), BackendError> {
        Err(missing())
    }
    fn launch(
        &mut self,
        _k: &str,
        _d: LaunchDims,
        _p: &[ParamValue],
        _dl: Instant,
    ) -> Result<LaunchReport, BackendError> {
        Err(missing())
    }
    fn time(
        &mut self,
        _k: &str,
        _d: LaunchDims,
        _p: &[ParamValue],
        _r: u32,
        _dl: Instant,
    ) -> Result<Option<Vec<f64>>, BackendError> {
        Ok(None)
    }
}
