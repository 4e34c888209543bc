// `sparkrun doctor` (docs/doctor.md).
#pragma once

namespace spark::launch {

/// argv[0] is "doctor". Without launch options: this host's checks (spark_doctor_probe
/// --host-checks). With launch options (-n, --host, ...; or inside SLURM): re-runs sparkrun with
/// spark_doctor_probe on every rank (libspark/tools/doctor_probe). See --help.
int doctor_main(int argc, char** argv);

}  // namespace spark::launch
