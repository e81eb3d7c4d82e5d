#pragma once
// `doctor MODEL`: whether the model starts on this machine (doctor_model.cpp), as findings beside the
// machine's own.
#include "ortfleet/diagnostics/doctor.hpp"

namespace ortfleet::detail {

/// Reads the model's file and starts it once on `options.device` in a fresh process: fills
/// `report.model` and adds its findings (a crash's names --locate-crash as the next step).
void check_model(DoctorReport& report, const DoctorOptions& options);

}  // namespace ortfleet::detail
