// Passthrough overhead: the same GET at a fixed arrival rate, against the
// upstream directly and through sitegrid-proxy. Run by passthrough-bench.sh.
import http from 'k6/http';
import { check } from 'k6';

export const options = {
  discardResponseBodies: true,
  scenarios: {
    fixed_rate: {
      executor: 'constant-arrival-rate',
      rate: Number(__ENV.RATE || 500),
      timeUnit: '1s',
      duration: __ENV.DURATION || '20s',
      preAllocatedVUs: 20,
      maxVUs: 100,
    },
  },
  summaryTrendStats: ['p(50)', 'p(99)', 'max'],
};

export default function () {
  const res = http.get(`${__ENV.TARGET}/api/v1/namespaces/default/configmaps/bench`);
  check(res, { 'status 200': (r) => r.status === 200 });
}
