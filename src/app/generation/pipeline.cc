#include "app/generation/pipeline.h"

namespace kvgate::app {
namespace net = boost::asio;
namespace {

// Counts a generation request for the whole of its handler, so a drain knows when none is left.
class ActiveGeneration {
 public:
  explicit ActiveGeneration(std::atomic<int64_t>& n) : n_(n) { n_.fetch_add(1); }
  ~ActiveGeneration() { n_.fetch_sub(1); }
  ActiveGeneration(const ActiveGeneration&) = delete;
  ActiveGeneration& operator=(const ActiveGeneration&) = delete;

 private:
  std::atomic<int64_t>& n_;
};

}  // namespace

net::awaitable<void> GenerationPipeline::serve(ApiRoute route, const http::Request& req,
                                               http::Responder& res, const TypedRequest* typed,
                                               bool name_worker) {
  Generation g(route, req, res, parts_.clock.now());
  g.typed = typed;
  g.request_id = request_id_of(req);
  // --decision-headers: the decision's text, on the answer and in the access log when asked.
  g.explain = wants_decision(parts_.decision_headers, req.header(kExplainRequestHeader));
  // (A gRPC call's answer names its worker in the message: the front reads the header.)
  g.name_worker =
      parts_.config.expose_worker_header || g.explain || typed != nullptr || name_worker;
  g.record = {.method = "POST", .path = req.path(), .request_id = g.request_id};
  const ActiveGeneration active(parts_.active);
  AdmissionGate::Ticket admitted;  // the slot, held to the end
  g.ticket = &admitted;
  if (co_await admit(parts_, g, &admitted) && co_await parse(parts_, g) &&
      co_await limit(parts_, g)) {
    prepare_route(parts_, g);
    co_await dispatch(parts_, g);
  }
  account(parts_, g);
}

}  // namespace kvgate::app
