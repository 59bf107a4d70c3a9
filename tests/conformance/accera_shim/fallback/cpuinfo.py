"""Stand-in for py-cpuinfo's get_cpu_info (only the flags Accera's test_utils reads), used by the
conformance runner when py-cpuinfo is not installed."""


def get_cpu_info():
    flags = []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = line.split(":", 1)[1].split()
                    break
    except OSError:
        pass
    return {"flags": flags}
