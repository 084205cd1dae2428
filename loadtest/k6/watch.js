// Many concurrent watch connections: each VU holds one watch of
// EndpointSlices open for WATCH_SECONDS, then opens the next. Measures the
// time to the watch's headers (http_req_waiting) and how many watches were
// refused. Run by sitegrid-report (scenario `external`) against the proxy
// and the upstream:
//   k6 run -e TARGET=http://127.0.0.1:PORT -e VUS=500 -e DURATION=10s watch.js
import http from 'k6/http';
import { check } from 'k6';

const watchSeconds = Number(__ENV.WATCH_SECONDS || 5);

export const options = {
  discardResponseBodies: true,
  scenarios: {
    watches: {
      executor: 'constant-vus',
      vus: Number(__ENV.VUS || 500),
      duration: __ENV.DURATION || '10s',
      gracefulStop: `${watchSeconds + 5}s`,
    },
  },
  summaryTrendStats: ['p(50)', 'p(99)', 'max'],
};

export default function () {
  const res = http.get(
    `${__ENV.TARGET}/apis/discovery.k8s.io/v1/endpointslices?watch=1&allowWatchBookmarks=true&timeoutSeconds=${watchSeconds}`,
    { timeout: `${watchSeconds + 10}s` },
  );
  check(res, { 'status 200': (r) => r.status === 200 });
}
