import roslibpy

ros = roslibpy.Ros(host='127.0.0.1', port=9090)
ros.run()

# Provide /add (any other client could be the caller).
def add(request, response):
    response['sum'] = request['a'] + request['b']
    return True

server = roslibpy.Service(ros, '/add', 'example_interfaces/srv/AddTwoInts')
server.advertise(add)

chatter = roslibpy.Topic(ros, '/chatter', 'std_msgs/msg/String')
chatter.subscribe(lambda m: print('heard', m['data']))
chatter.publish(roslibpy.Message({'data': 'hello'}))

# A Service object that advertises does not call: use another one.
client = roslibpy.Service(ros, '/add', 'example_interfaces/srv/AddTwoInts')
print('1 + 2 =', client.call(roslibpy.ServiceRequest({'a': 1, 'b': 2}), timeout=5)['sum'])

ros.terminate()
