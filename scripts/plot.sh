#!/usr/bin/env bash
# Draws a udp_sim --csv time series into a PNG: throughput (replies/s, requests/s) on top, latency
# (p50, p99) below, failed requests (TIMEOUT, UNAVAILABLE, no reply) as bars, and a vertical line
# with a label at each --mark moment (seconds since the load started).
#
#   scripts/plot.sh run.csv out.png [--title TEXT] [--mark 3.0:"assign 1-25000 hash2"]...
#
# Needs gnuplot (Debian: gnuplot-nox); installs it with apt-get when missing and run as root.
set -euo pipefail
# --help: the comment above.
[[ "${1:-}" == --help || "${1:-}" == -h ]] && { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" | grep -v '^shellcheck'; exit 0; }

usage() { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 64; }
[[ $# -ge 2 ]] || usage
csv=$1 png=$2
shift 2
title="udp_sim: throughput and latency over time"
marks=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --mark) [[ $# -ge 2 && $2 == *:* ]] || usage; marks+=("$2"); shift 2 ;;
    --title) [[ $# -ge 2 ]] || usage; title=$2; shift 2 ;;
    *) usage ;;
  esac
done
[[ -r $csv ]] || { echo "plot.sh: cannot read $csv" >&2; exit 66; }
head -n 1 "$csv" | grep -q '^elapsed_s,sent_per_s,done_per_s,p50_us,p99_us' ||
  { echo "plot.sh: $csv is not a udp_sim --csv file" >&2; exit 65; }
[[ $(wc -l <"$csv") -ge 2 ]] || { echo "plot.sh: $csv has no rows" >&2; exit 65; }

if ! command -v gnuplot >/dev/null; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    echo "plot.sh: installing gnuplot-nox" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q gnuplot-nox >/dev/null ||
      { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q gnuplot-nox >/dev/null; }
  else
    echo "plot.sh: gnuplot is missing (Debian: apt-get install gnuplot-nox, as root)" >&2
    exit 69
  fi
fi

# Column numbers from the header, so that added columns do not break the plot.
col() {
  local n
  n=$(head -n 1 "$csv" | tr ',' '\n' | grep -nx "$1" | cut -d: -f1)
  [[ -n $n ]] || { echo "plot.sh: no column $1 in $csv" >&2; exit 65; }
  echo "$n"
}
c_t=$(col elapsed_s) c_sent=$(col sent_per_s) c_done=$(col done_per_s)
c_p50=$(col p50_us) c_p99=$(col p99_us)
c_timeout=$(col TIMEOUT) c_unavail=$(col UNAVAILABLE) c_noreply=$(col no_reply)

# gnuplot strings are double-quoted: drop characters that would end them.
clean() { printf '%s' "$1" | tr -d '"\\'; }
mark_cmds=""
i=0
for m in "${marks[@]}"; do
  at=${m%%:*} label=$(clean "${m#*:}")
  [[ $at =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "plot.sh: --mark $m: expected SECONDS:LABEL" >&2; exit 64; }
  i=$((i + 1))
  # Labels alternate between two heights so that close marks stay readable.
  y=$([[ $((i % 2)) -eq 1 ]] && echo 0.96 || echo 0.88)
  mark_cmds+="set arrow $i from $at, graph 0 to $at, graph 1 nohead lc rgb '#cc3333' dt 2 lw 2 front"$'\n'
  mark_cmds+="set label $i \"$label\" at $at, graph $y offset 0.5,0 tc rgb '#cc3333' front"$'\n'
done

gnuplot <<GNUPLOT
set terminal pngcairo size 1200,800 font "sans,11" noenhanced
set output "$(clean "$png")"
set datafile separator ","
set key below horizontal
set grid
set xrange [0:*]
set autoscale xfixmax
set multiplot layout 2,1 title "$(clean "$title")"
# Same margins in both panels, so the marks line up.
set lmargin 12
set rmargin 12
set ylabel "requests per second"
set format y "%.0f"
set yrange [0:*]
set y2range [0:1<*]
set y2tics
set y2label "failed requests per interval"
$mark_cmds
plot "$csv" every ::1 using $c_t:$c_done with lines lw 2 lc rgb '#1f77b4' title "replies/s", \
     "" every ::1 using $c_t:$c_sent with lines lw 1 dt 3 lc rgb '#7f7f7f' title "requests/s sent", \
     "" every ::1 using $c_t:(\$$c_timeout + \$$c_unavail + \$$c_noreply) axes x1y2 with impulses lw 4 lc rgb '#d62728' title "TIMEOUT + UNAVAILABLE + no reply"
unset y2tics
unset y2label
set xlabel "seconds since the load started"
set ylabel "latency (microseconds)"
set yrange [0:*]
plot "$csv" every ::1 using $c_t:$c_p99 with linespoints lw 2 pt 7 ps 0.6 lc rgb '#ff7f0e' title "p99", \
     "" every ::1 using $c_t:$c_p50 with lines lw 1 lc rgb '#2ca02c' title "p50"
unset multiplot
GNUPLOT
echo "plot.sh: wrote $png"
