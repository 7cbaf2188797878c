// The fleet's cluster protocol (internal to src/fleet/cluster): what rank 0's coordinator
// (coordinator.h) and the worker ranks (worker_rank.h) say to each other through a Cluster
// (cluster.h). Free of MPI.
//
// Messages are packets: a JSON head and a list of byte blobs (checkpoint and model files). A
// worker asks for a job (kRequest); rank 0 answers with the index of the next queue entry in
// plan order, or -1 when there is none, plus the job's checkpoint from the output folder when a
// resumed run has one (kAssign). While it trains, the worker reports finished epochs (kEpoch),
// the checkpoint file written after an epoch when a quarter second has passed since the last one
// it shipped (kCheckpoint) and, for the live display, progress (kProgress); at the end the result
// record with its history and the saved model file (kResult), which also asks for the next job.
// So an unfinished job resumes, on any rank, from a checkpoint at most an epoch and a quarter
// second old. Messages from one rank arrive in the order they were sent, so rank 0 writes a job's
// files in the order a local worker does, its record (which --resume trusts) last; its file
// writer also prints the job's lines, in order.
//
// Only the main thread of a rank calls MPI. It polls: MPI's blocking calls spin, and a spinning
// thread would take a core from the pinned workers. Rank 0 looks every kPollEvery (500 us) when
// nothing came; a worker rank sleeps on a condition variable until a worker has something to
// send (or 5 ms have passed) and polls every 20 us only while a worker waits for an answer or a
// send is under way.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "fleet/fleet_data.h"
#include "fleet/fleet_types.h"

namespace nnfleet::fleet_detail {

struct Packet {
  Json head = Json::object();
  std::vector<std::string> blobs;
};

std::string encode(const Packet& p);
// A packet encode() made (the bytes come from another rank of this run: a bad one is our bug).
Packet decode(const std::string& s);

// JSON has no NaN: losses that became NaN travel as null.
Json number(double v);
double number(const Json& j);

Json epoch_to_json(const EpochRecord& r);
EpochRecord epoch_from_json(const Json& j);

// Microseconds from `t` to now.
double us_since(std::chrono::steady_clock::time_point t);

// What every rank tells rank 0 before the run (collective gather; JSON).
struct RankInfo {
  int rank = 0;
  std::string host;
  std::vector<int> cores;  // one per worker
  bool loaded_data = false;
  uint64_t plan_hash = 0, data_hash = 0;  // data_hash 0: not computed on this rank
  Json to_json() const;
  static RankInfo from_json(const Json& j);
};

// This process's resident memory now (private and shared) and its peak, from /proc.
void measure_memory(RankSummary& r);

// Hash of what must be equal on every rank for equal results: the seed and every expanded model.
uint64_t plan_hash(const Plan& plan);
// Hash of the data as loaded (arrays, shapes, dtypes, split, scale).
uint64_t data_hash(const std::vector<FleetData>& sources);

}  // namespace nnfleet::fleet_detail
