// Control-plane bytes from the network (launcher <-> node daemons, docs/multihost.md): the
// frame decoder, then the payload decoder of the frame's type, as the server and the daemon
// apply them. Anything malformed must be a ProtocolError, never a crash or a huge allocation.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "control/messages.hpp"
#include "control/wire.hpp"
#include "fuzz_seeds.hpp"

namespace ctl = spark::launch::control;

namespace {

void decode_payload(const ctl::Frame& f) {
  switch (f.type) {
    case ctl::MsgType::kChallenge:
      (void)ctl::decode_challenge(f.payload);
      break;
    case ctl::MsgType::kHello:
      (void)ctl::decode_hello(f.payload);
      break;
    case ctl::MsgType::kWelcome:
      (void)ctl::decode_welcome(f.payload);
      break;
    case ctl::MsgType::kPlan:
      (void)ctl::decode_plan(f.payload);
      break;
    case ctl::MsgType::kFenceUp:
    case ctl::MsgType::kFenceDown:
      (void)ctl::decode_fence(f.payload);
      break;
    case ctl::MsgType::kFailed:
      (void)ctl::decode_failed(f.payload);
      break;
    case ctl::MsgType::kDone:
      (void)ctl::decode_done(f.payload);
      break;
    case ctl::MsgType::kAbort:
      (void)ctl::decode_abort(f.payload);
      break;
    default:
      break;
  }
}

// Seeds: one frame of every type, made by the real encoders (after the mode byte 0x01:
// authenticated limit, one byte at a time).
void write_seed(const char* dir, const std::string& name, const std::string& frames) {
  spark::fuzz::write_seed(dir, name, "\x01" + frames);
}

void write_seeds(const char* dir) {
  ctl::Challenge c;
  c.nonce.fill(7);
  write_seed(dir, "challenge", ctl::encode_frame(ctl::MsgType::kChallenge, ctl::encode(c)));
  ctl::Hello h;
  h.node = 1;
  write_seed(dir, "hello", ctl::encode_frame(ctl::MsgType::kHello, ctl::encode(h)));
  write_seed(dir, "welcome",
             ctl::encode_frame(ctl::MsgType::kWelcome, ctl::encode(ctl::Welcome{})));
  ctl::PlanMsg p;
  p.job_id = "sparkrun.1234";
  p.node = 1;
  p.argv = {"./app", "--flag"};
  p.exports = {{"SPARK_TRACE", "1"}};
  p.bind_to = "core";
  p.plan.size = 3;
  p.plan.nodes = {{"a", true, 2, {0, 1}}, {"b", false, 1, {2}}};
  p.plan.ranks = {{0, 0, 0}, {1, 0, 1}, {2, 1, 0}};
  write_seed(dir, "plan", ctl::encode_frame(ctl::MsgType::kPlan, ctl::encode(p)));
  write_seed(dir, "fence",
             ctl::encode_frame(ctl::MsgType::kFenceUp, ctl::encode(ctl::Fence{3, "blob"})));
  write_seed(dir, "failed",
             ctl::encode_frame(ctl::MsgType::kFailed, ctl::encode(ctl::Failed{9, "rank 1 died"})));
  write_seed(dir, "done", ctl::encode_frame(ctl::MsgType::kDone, ctl::encode(ctl::Done{0})));
  write_seed(dir, "abort",
             ctl::encode_frame(ctl::MsgType::kAbort, ctl::encode(ctl::Abort{true, "stop"})));
  write_seed(dir, "two_frames",
             ctl::encode_frame(ctl::MsgType::kHeartbeat, "") +
                 ctl::encode_frame(ctl::MsgType::kDone, ctl::encode(ctl::Done{3})));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spark::fuzz::seeds_requested(write_seeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  // The first byte chooses the decoder's limit (before / after authentication) and how the
  // bytes arrive (all at once or in small pieces), as a socket may deliver them.
  const bool authed = (data[0] & 1) != 0;
  const std::size_t chunk = 1 + (data[0] >> 1);
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  ctl::FrameDecoder dec(authed ? ctl::kMaxPayload : ctl::kMaxUnauthenticatedPayload);
  try {
    while (!in.empty()) {
      const auto n = std::min(chunk, in.size());
      dec.feed(in.substr(0, n));
      in.remove_prefix(n);
      while (auto f = dec.next()) {
        try {
          decode_payload(*f);
        } catch (const ctl::ProtocolError&) {
        }
      }
    }
  } catch (const ctl::ProtocolError&) {
  }
  return 0;
}
