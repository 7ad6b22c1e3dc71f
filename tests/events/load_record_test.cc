// Pushed load records: what the mock encodes, the gateway decodes; anything else is refused.
#include "kvgate/events/load_record.h"

#include <gtest/gtest.h>

#include <msgpack.hpp>

namespace kvgate::events {
namespace {

std::span<const uint8_t> bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(LoadRecord, RoundTrips) {
  LoadRecord r{.running = 12,
               .waiting = 3,
               .kv_usage = 0.625,
               .queued_prefill_tokens = 40960,
               .ts = 1733000000.25,
               .dp_rank = 1};
  std::string payload;
  encode_load_record(r, &payload);
  EXPECT_EQ(decode_load_record(bytes(payload)), r);
  r.dp_rank.reset();
  encode_load_record(r, &payload);
  EXPECT_EQ(decode_load_record(bytes(payload)), r);
}

TEST(LoadRecord, RefusesWhatIsNotALoad) {
  std::string s;
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(2);
  pk.pack_uint32(1);
  pk.pack_uint32(2);
  EXPECT_FALSE(decode_load_record(bytes(std::string(buf.data(), buf.size()))));  // not a map
  buf.clear();
  pk.pack_map(1);
  pk.pack(std::string("waiting"));
  pk.pack_uint32(2);
  EXPECT_FALSE(decode_load_record(bytes(std::string(buf.data(), buf.size()))))
      << "running is required";
  buf.clear();
  pk.pack_map(2);
  pk.pack(std::string("running"));
  pk.pack_uint32(2);
  pk.pack(std::string("kv_usage"));
  pk.pack_double(1.5);
  EXPECT_FALSE(decode_load_record(bytes(std::string(buf.data(), buf.size())))) << "a usage above 1";
  buf.clear();
  pk.pack_map(2);
  pk.pack(std::string("running"));
  pk.pack(std::string("many"));
  pk.pack(std::string("x"));
  pk.pack_nil();
  EXPECT_FALSE(decode_load_record(bytes(std::string(buf.data(), buf.size()))));
  EXPECT_FALSE(decode_load_record(bytes(std::string("\xc1 not msgpack"))));
  EXPECT_FALSE(decode_load_record({}));
  // Unknown keys are ignored.
  buf.clear();
  pk.pack_map(2);
  pk.pack(std::string("running"));
  pk.pack_uint32(7);
  pk.pack(std::string("future_field"));
  pk.pack(std::string("ignored"));
  const auto ok = decode_load_record(bytes(std::string(buf.data(), buf.size())));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->running, 7u);
}

}  // namespace
}  // namespace kvgate::events
