#include "dashboard/http_request.h"

#include <gtest/gtest.h>

#include <string>

namespace sray::dashboard {
namespace {

using Outcome = HttpParse::Outcome;

TEST(HttpRequestParse, ReadsTheRequestLinePathQueryAndHeaders) {
  const std::string bytes =
      "GET /api/logs/0/7?offset=12&name=a%20b+c&offset=99 HTTP/1.1\r\n"
      "Host: 127.0.0.1\r\n"
      "AUTHORIZATION:   Bearer abc  \r\n"
      "\r\n";
  const HttpParse parse = ParseHttpRequest(bytes);
  ASSERT_EQ(parse.outcome, Outcome::kRequest) << parse.reason;
  EXPECT_EQ(parse.consumed, bytes.size());
  EXPECT_EQ(parse.request.method, "GET");
  EXPECT_EQ(parse.request.path, "/api/logs/0/7");
  EXPECT_EQ(parse.request.Query("offset"), "12") << "the first of a name counts";
  EXPECT_EQ(parse.request.Query("name"), "a b c");
  EXPECT_EQ(parse.request.Query("missing"), "");
  EXPECT_EQ(parse.request.Header("authorization"), "Bearer abc");
  EXPECT_EQ(parse.request.Header("Host"), "127.0.0.1");
  EXPECT_TRUE(parse.request.keep_alive);
}

TEST(HttpRequestParse, KeepAliveFollowsTheVersionAndTheConnectionHeader) {
  EXPECT_FALSE(ParseHttpRequest("GET / HTTP/1.1\r\nConnection: keep-alive, Close\r\n\r\n")
                   .request.keep_alive);
  EXPECT_FALSE(ParseHttpRequest("GET / HTTP/1.0\r\n\r\n").request.keep_alive);
  EXPECT_TRUE(
      ParseHttpRequest("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").request.keep_alive);
}

TEST(HttpRequestParse, WaitsForTheWholeHeadAndBodyAndStopsAtTheirEnd) {
  const std::string first = "POST /a HTTP/1.1\nContent-Length: 3\n\nxyz";
  const std::string both = first + "GET /b HTTP/1.1\r\n\r\n";
  for (std::size_t length = 0; length < first.size(); ++length) {
    const HttpParse partial = ParseHttpRequest(both.substr(0, length));
    EXPECT_EQ(partial.outcome, Outcome::kNeedMore) << length;
    EXPECT_EQ(partial.head_complete, length >= first.size() - 3) << length;
  }
  const HttpParse parse = ParseHttpRequest(both);
  ASSERT_EQ(parse.outcome, Outcome::kRequest) << parse.reason;
  EXPECT_EQ(parse.consumed, first.size()) << "a pipelined request behind it is left";
  EXPECT_EQ(parse.request.body, "xyz");
  const HttpParse second = ParseHttpRequest(std::string_view(both).substr(parse.consumed));
  ASSERT_EQ(second.outcome, Outcome::kRequest);
  EXPECT_EQ(second.request.path, "/b");
}

TEST(HttpRequestParse, BlankLinesBeforeARequestAreSkipped) {
  const HttpParse parse = ParseHttpRequest("\r\n\r\nGET /x HTTP/1.1\r\n\r\n");
  ASSERT_EQ(parse.outcome, Outcome::kRequest);
  EXPECT_EQ(parse.request.path, "/x");
}

// A client that never ends its head must be refused as soon as it passed the
// limit, not read for ever.
TEST(HttpRequestParse, AHeadOverTheLimitIsRefusedBeforeItEnds) {
  HttpRequestLimits limits;
  limits.max_head_bytes = 1024;
  std::string endless = "GET / HTTP/1.1\r\n";
  while (endless.size() <= 1024) endless += "X-Padding: aaaaaaaaaaaaaaaa\r\n";
  const HttpParse parse = ParseHttpRequest(endless, limits);
  EXPECT_EQ(parse.outcome, Outcome::kRefused);
  EXPECT_EQ(parse.status, 431);
  EXPECT_NE(parse.reason.find("1024 bytes"), std::string::npos) << parse.reason;
  // One line without an end, too.
  EXPECT_EQ(ParseHttpRequest("GET /" + std::string(2000, 'a'), limits).status, 431);
}

// Found by review: blank lines before a request were skipped without
// counting, so a client sending only line ends was read for ever.
TEST(HttpRequestParse, BlankLinesBeforeARequestCountTowardsTheLimit) {
  HttpRequestLimits limits;
  limits.max_head_bytes = 1024;
  const HttpParse endless = ParseHttpRequest(std::string(4096, '\n'), limits);
  EXPECT_EQ(endless.outcome, Outcome::kRefused);
  EXPECT_EQ(endless.status, 431);
  EXPECT_EQ(ParseHttpRequest(std::string(2000, '\n') + "GET / HTTP/1.1\r\n\r\n", limits).status,
            431);
}

TEST(HttpRequestParse, TooManyHeadersAreRefused) {
  HttpRequestLimits limits;
  limits.max_headers = 3;
  std::string bytes = "GET / HTTP/1.1\r\n";
  for (int header = 0; header < 4; ++header) bytes += "A: b\r\n";
  const HttpParse parse = ParseHttpRequest(bytes + "\r\n", limits);
  EXPECT_EQ(parse.status, 431);
  EXPECT_NE(parse.reason.find("more than 3 headers"), std::string::npos) << parse.reason;
}

TEST(HttpRequestParse, MalformedRequestsAreRefusedWithTheStatusThatFits) {
  const std::pair<std::string, int> cases[] = {
      {"GARBAGE\r\n\r\n", 400},
      {"GET\r\n\r\n", 400},
      {"GET / HTTP/2.0\r\n\r\n", 505},
      {"GET / FTP/1.0\r\n\r\n", 400},
      {"GET http://elsewhere/ HTTP/1.1\r\n\r\n", 400},
      {"G(T / HTTP/1.1\r\n\r\n", 400},
      {"GET /%zz HTTP/1.1\r\n\r\n", 400},
      {"GET /?a=%4 HTTP/1.1\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nNo colon here\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nBad name: x\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 99999\r\n\r\n", 413},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 501},
  };
  for (const auto& [bytes, status] : cases) {
    const HttpParse parse = ParseHttpRequest(bytes);
    EXPECT_EQ(parse.outcome, Outcome::kRefused) << bytes;
    EXPECT_EQ(parse.status, status) << bytes << ": " << parse.reason;
    EXPECT_FALSE(parse.reason.empty()) << bytes;
  }
}

TEST(HttpRequestParse, PercentDecodingKeepsPlusInPathsOnly) {
  EXPECT_EQ(PercentDecoded("a+b%2Fc", false), "a+b/c");
  EXPECT_EQ(PercentDecoded("a+b%2fc", true), "a b/c");
  EXPECT_EQ(PercentDecoded("%", true), std::nullopt);
  EXPECT_EQ(PercentDecoded("%0", true), std::nullopt);
  EXPECT_EQ(PercentDecoded("%0g", true), std::nullopt);
}

}  // namespace
}  // namespace sray::dashboard
