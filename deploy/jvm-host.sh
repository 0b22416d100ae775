# JVM options that depend on the host, for the launcher and the perf scripts that start the JVM themselves (sourced).
# kvgate_host_jvm_options prints them; KVGATE_JAVA_OPTS comes after them on the command line, so an operator's own
# flag (e.g. -XX:-UseTransparentHugePages) wins.
#
# Transparent huge pages for the heap and the code cache, when the kernel hands them out on request ("madvise", the
# JVM asks for them) or to everyone ("always"). A gateway's I/O thread walks its heap, code cache and buffers on every
# request; with 2 MiB pages that is a few hundred page-table entries instead of a few hundred thousand. On the PVM
# guests this project is benchmarked on, the hypervisor holds a process's next thread after each pass of the kernel's
# DAMON access sampling (every 510 ms; shadow page tables rebuilt, as far as the guest can tell): with 4 KiB pages
# that held the JVM's thread, and its vCPU, for 3.5-5 ms, the p99 of a paced run (perf/results/paced-thp-2026-12-06.md);
# with huge pages the holds are gone. With the heap sized and touched at start (-Xms = -Xmx, -XX:+AlwaysPreTouch, as
# deploy/systemd/kvgate.service does), no huge page is assembled while serving.
kvgate_host_jvm_options() {
  case "$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)" in
    *"[always]"* | *"[madvise]"*) echo "-XX:+UseTransparentHugePages" ;;
  esac
}
