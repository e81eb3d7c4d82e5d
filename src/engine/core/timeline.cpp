#include "ortfleet/engine/timeline.hpp"

#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <nlohmann/json.hpp>
#include <set>

#include "ortfleet/base/error.hpp"
#include "base/json_errors.hpp"
#include "ortfleet/base/settings.hpp"

namespace ortfleet {
using nlohmann::json;


Timeline::Timeline(int64_t origin_ns) : origin_ns_(origin_ns) {}

Timeline::Timeline(const Timeline& other) {
  std::lock_guard lock(other.mutex_);
  origin_ns_ = other.origin_ns_;
  events_ = other.events_;
}

Timeline& Timeline::operator=(const Timeline& other) {
  if (this == &other) return *this;
  std::scoped_lock lock(mutex_, other.mutex_);
  origin_ns_ = other.origin_ns_;
  events_ = other.events_;
  return *this;
}

void Timeline::add(TimelineEvent event) {
  if (event.pid == 0) event.pid = static_cast<int>(::getpid());
  std::lock_guard lock(mutex_);
  events_.push_back(std::move(event));
}

void Timeline::add_all(const std::vector<TimelineEvent>& events) {
  std::lock_guard lock(mutex_);
  events_.insert(events_.end(), events.begin(), events.end());
}

std::vector<TimelineEvent> Timeline::events() const {
  std::vector<TimelineEvent> copy;
  {
    std::lock_guard lock(mutex_);
    copy = events_;
  }
  std::stable_sort(copy.begin(), copy.end(), [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
  return copy;
}

Timeline::Scope::Scope(Timeline* timeline, std::string name, std::string lane) : timeline_(timeline) {
  event_.name = std::move(name);
  event_.lane = std::move(lane);
  event_.start_ns = monotonic_ns();
}

Timeline::Scope::Scope(Scope&& other) noexcept : timeline_(other.timeline_), event_(std::move(other.event_)) {
  other.timeline_ = nullptr;
}

Timeline::Scope::~Scope() {
  if (std::uncaught_exceptions() > 0) event_.args.emplace("failed", "true");
  finish();
}

void Timeline::Scope::finish() {
  if (timeline_ == nullptr) return;
  event_.end_ns = monotonic_ns();
  timeline_->add(std::move(event_));
  timeline_ = nullptr;
}

double Timeline::span_ms(const std::string& lane) const {
  int64_t first = INT64_MAX;
  int64_t last = INT64_MIN;
  std::lock_guard lock(mutex_);
  for (const auto& e : events_) {
    if (!lane.empty() && e.lane != lane) continue;
    first = std::min(first, e.start_ns);
    last = std::max(last, e.end_ns);
  }
  return first > last ? 0.0 : static_cast<double>(last - first) / 1e6;
}

std::map<std::string, double> Timeline::phase_totals_ms(const std::string& lane) const {
  std::map<std::string, double> totals;
  std::lock_guard lock(mutex_);
  for (const auto& e : events_) {
    if (lane.empty() || e.lane == lane) totals[e.name] += e.duration_ms();
  }
  return totals;
}

std::string Timeline::to_json() const {
  json events = json::array();
  for (const auto& e : this->events()) {
    events.push_back({{"name", e.name},
                      {"lane", e.lane},
                      {"start_ns", e.start_ns},
                      {"end_ns", e.end_ns},
                      {"start_ms", static_cast<double>(e.start_ns - origin_ns_) / 1e6},
                      {"duration_ms", e.duration_ms()},
                      {"pid", e.pid},
                      {"args", e.args}});
  }
  return json{{"ortfleet_timeline", 1}, {"origin_ns", origin_ns_}, {"events", events}}.dump(-1, ' ', false, json::error_handler_t::replace);  // a path of invalid UTF-8 in an argument: U+FFFD
}

Timeline Timeline::from_json(const std::string& text) {
  auto bad = [](const std::string& why) -> Error {
    return Error("malformed timeline JSON: " + why, "It should come from ortfleet's own " + named(Setting::timeline) + " output");
  };
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number too large (1e999)
    throw bad(detail::json_error_text(e));
  }
  if (!j.is_object() || !j.contains("origin_ns") || !j.contains("events") || !j["events"].is_array() ||
      !j["origin_ns"].is_number_integer()) {
    throw bad("expected an object with an integer origin_ns and a list of events");
  }
  Timeline t(j["origin_ns"].get<int64_t>());
  for (const auto& e : j["events"]) {
    try {
      TimelineEvent ev;
      ev.name = e.at("name").get<std::string>();
      ev.lane = e.at("lane").get<std::string>();
      ev.start_ns = e.at("start_ns").get<int64_t>();
      ev.end_ns = e.at("end_ns").get<int64_t>();
      ev.pid = e.value("pid", 0);
      if (e.contains("args")) ev.args = e.at("args").get<std::map<std::string, std::string>>();
      if (ev.end_ns < ev.start_ns) throw bad("event '" + ev.name + "' ends before it starts");
      t.events_.push_back(std::move(ev));
    } catch (const json::exception& ex) {
      throw bad("event: " + detail::json_error_text(ex));
    }
  }
  return t;
}

std::string Timeline::to_chrome_trace() const {
  const auto all = events();
  // One track (tid) per lane within each process, named after the lane.
  std::map<std::pair<int, std::string>, int> tids;
  json trace = json::array();
  std::set<int> pids;
  for (const auto& e : all) {
    auto key = std::make_pair(e.pid, e.lane);
    if (!tids.count(key)) {
      const int tid = static_cast<int>(tids.size()) + 1;
      tids[key] = tid;
      trace.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", e.pid}, {"tid", tid}, {"args", {{"name", e.lane}}}});
      trace.push_back({{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", e.pid}, {"tid", tid}, {"args", {{"sort_index", tid}}}});
    }
    if (pids.insert(e.pid).second) {
      trace.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", e.pid}, {"args", {{"name", "pid " + std::to_string(e.pid)}}}});
    }
    json args = e.args;
    trace.push_back({{"ph", "X"},
                     {"name", e.name},
                     {"cat", "ortfleet"},
                     {"pid", e.pid},
                     {"tid", tids[key]},
                     {"ts", static_cast<double>(e.start_ns - origin_ns_) / 1e3},
                     {"dur", static_cast<double>(e.end_ns - e.start_ns) / 1e3},
                     {"args", args}});
  }
  return json{{"traceEvents", trace}, {"displayTimeUnit", "ms"}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace ortfleet
