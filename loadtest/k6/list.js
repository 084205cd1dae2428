// LIST at a fixed arrival rate (open model: a slow answer does not slow the
// requests down). Run by sitegrid-report (scenario `external`):
//   k6 run -e TARGET=http://127.0.0.1:PORT -e RATE=100 -e DURATION=10s list.js
import http from 'k6/http';
import { check } from 'k6';

export const options = {
  discardResponseBodies: true,
  scenarios: {
    fixed_rate: {
      executor: 'constant-arrival-rate',
      rate: Number(__ENV.RATE || 100),
      timeUnit: '1s',
      duration: __ENV.DURATION || '10s',
      preAllocatedVUs: 20,
      maxVUs: 200,
    },
  },
  summaryTrendStats: ['p(50)', 'p(99)', 'max'],
};

export default function () {
  const path = __ENV.LIST_PATH || '/apis/discovery.k8s.io/v1/endpointslices';
  const res = http.get(`${__ENV.TARGET}${path}`);
  check(res, { 'status 200': (r) => r.status === 200 });
}
