//! SM clocks and throttling around a measurement, read through NVML.
//!
//! A timing taken while the GPU was power- or thermally-throttled is not the kernel's speed:
//! the report flags it. NVML is loaded at run time (`libnvidia-ml.so.1`, part of the driver);
//! where it is missing the record is simply absent.

pub use crate::model::timing::{ClockReading, ClockRecord};
use nvml_wrapper::Nvml;
use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use std::sync::OnceLock;

/// Names of the throttle reasons that slow kernels.
pub fn slowing_reasons(bits: u64) -> Vec<String> {
    let r = ThrottleReasons::from_bits_truncate(bits);
    [
        (ThrottleReasons::SW_POWER_CAP, "sw_power_cap"),
        (ThrottleReasons::HW_SLOWDOWN, "hw_slowdown"),
        (ThrottleReasons::SW_THERMAL_SLOWDOWN, "sw_thermal_slowdown"),
        (ThrottleReasons::HW_THERMAL_SLOWDOWN, "hw_thermal_slowdown"),
        (
            ThrottleReasons::HW_POWER_BRAKE_SLOWDOWN,
            "hw_power_brake_slowdown",
        ),
        (ThrottleReasons::SYNC_BOOST, "sync_boost"),
    ]
    .into_iter()
    .filter(|(f, _)| r.contains(*f))
    .map(|(_, n)| n.to_string())
    .collect()
}

fn nvml() -> Option<&'static Nvml> {
    static NVML: OnceLock<Option<Nvml>> = OnceLock::new();
    NVML.get_or_init(|| Nvml::init().ok()).as_ref()
}

/// Read the GPU with PCI bus id `pci` (as `cuDeviceGetPCIBusId` gives it); `None` where NVML
/// is absent or does not know the device.
pub fn read(pci: &str) -> Option<ClockReading> {
    let nvml = nvml()?;
    let dev = nvml.device_by_pci_bus_id(pci).ok()?;
    Some(ClockReading {
        sm_mhz: dev.clock_info(Clock::SM).ok()?,
        max_sm_mhz: dev.max_clock_info(Clock::SM).unwrap_or(0),
        temperature_c: dev.temperature(TemperatureSensor::Gpu).ok(),
        throttle: dev
            .current_throttle_reasons()
            .map(|r| slowing_reasons(r.bits()))
            .unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_reasons_that_slow_a_kernel_count() {
        let idle = ThrottleReasons::GPU_IDLE | ThrottleReasons::APPLICATIONS_CLOCKS_SETTING;
        assert!(slowing_reasons(idle.bits()).is_empty());
        let hot = ThrottleReasons::SW_POWER_CAP | ThrottleReasons::HW_THERMAL_SLOWDOWN;
        assert_eq!(
            slowing_reasons(hot.bits()),
            vec!["sw_power_cap", "hw_thermal_slowdown"]
        );
        let calm = ClockReading {
            sm_mhz: 1980,
            max_sm_mhz: 1980,
            temperature_c: None,
            throttle: vec![],
        };
        let hot = ClockReading {
            sm_mhz: 1500,
            throttle: vec!["sw_power_cap".into()],
            ..calm.clone()
        };
        let r = ClockRecord::new(calm.clone(), hot);
        assert!(r.throttled);
        assert!(r.describe().contains("throttled (sw_power_cap)"));
        assert!(!ClockRecord::new(calm.clone(), calm).throttled);
        // Without a driver there is nothing to read, and no panic.
        assert!(read("0000:00:00.0").is_none() || nvml().is_some());
    }
}
